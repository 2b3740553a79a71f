include(CMakePackageConfigHelpers)

install(TARGETS hoccl EXPORT hocclTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT hocclTargets NAMESPACE hoccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)

configure_package_config_file(cmake/hocclConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/hocclConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hocclConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hocclConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/hocclConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)

# hoccl.pc finds the prefix relative to itself (lib/pkgconfig, or
# lib/<multiarch>/pkgconfig when installed to /usr on Debian).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(HOCCL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _pc_to_prefix "${_pc_to_prefix}")
  set(HOCCL_PC_PREFIX "\${pcfiledir}/${_pc_to_prefix}")
endif()
configure_file(cmake/hoccl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/hoccl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hoccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
