"""Makes this interpreter import hoccl_torch from a build tree: writes
hoccl_torch.pth, naming the build's python/ folder, into the first site
directory (for Debian's /usr/bin/python3 run as root:
/usr/local/lib/python3.X/dist-packages; otherwise the user site directory).

    python3 develop.py BUILD/bindings/torch/python
"""
import os
import site
import sys


def main():
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "hoccl_torch")):
        sys.exit("usage: develop.py BUILD/bindings/torch/python (a folder holding hoccl_torch/)")
    path = os.path.abspath(sys.argv[1])
    candidates = list(site.getsitepackages()) + [site.getusersitepackages()]
    for d in candidates:
        try:
            os.makedirs(d, exist_ok=True)
            pth = os.path.join(d, "hoccl_torch.pth")
            with open(pth, "w") as f:
                f.write(path + "\n")
        except OSError:
            continue
        print(f"hoccl_torch: {sys.executable} now imports hoccl_torch from {path} ({pth})")
        return
    sys.exit("hoccl_torch: no writable site directory among " + ", ".join(candidates))


if __name__ == "__main__":
    main()
