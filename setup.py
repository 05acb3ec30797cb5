"""pip's build of nano_torch (pyproject.toml): CMake builds the extension (which carries nano's
launcher), nano-run (the rank shim of distributed_backend="mpi") and the listen guard for the
torch of the Python that runs pip, and the wheel holds them beside the package's Python files:

    nano_torch/_C*.so
    nano_torch/_nano/bin/nano-run
    nano_torch/_nano/lib/nano/libnano_listen_guard.so   (where nano-run looks for it)

NANO_BUILD_DIR: build in (or reuse) this CMake build folder instead of build/pip; it must be
configured for the same torch."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build = os.path.abspath(os.environ.get("NANO_BUILD_DIR") or os.path.join(ROOT, "build", "pip"))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                            f"-DNANO_PYTHON={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", build, "--target", "nano_torch_ext", "nano-run", "nano_listen_guard"],
                       check=True)
        package = os.path.join(self.build_lib, "nano_torch")
        built = glob.glob(os.path.join(build, "lib", "nano", "python", "nano_torch", "_C*.so"))
        if len(built) != 1:
            sys.exit(f"setup.py: expected one nano_torch/_C*.so in {build}, found {built}")
        shutil.copy(built[0], package)
        for source, target in ((os.path.join(build, "bin", "nano-run"), "_nano/bin/nano-run"),
                               (os.path.join(build, "lib", "nano", "libnano_listen_guard.so"),
                                "_nano/lib/nano/libnano_listen_guard.so")):
            os.makedirs(os.path.dirname(os.path.join(package, target)), exist_ok=True)
            shutil.copy2(source, os.path.join(package, target))


os.makedirs(os.path.join(ROOT, "build-setuptools"), exist_ok=True)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it holds a compiled module and programs


setup(packages=["nano_torch"], package_dir={"nano_torch": "python/nano_torch"},
      cmdclass={"build_py": BuildWithCMake}, distclass=BinaryDistribution,
      # setuptools' own staging, apart from CMake's build folders (both ignored by git)
      options={"build": {"build_base": "build-setuptools"}, "egg_info": {"egg_base": "build-setuptools"}})
