include(CMakePackageConfigHelpers)

install(TARGETS hoccl EXPORT hocclTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS hoccl-info hoccl-topo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT hocclTargets NAMESPACE hoccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)

configure_package_config_file(cmake/hocclConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/hocclConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hocclConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hocclConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/hocclConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hoccl)

configure_file(cmake/hoccl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/hoccl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hoccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
