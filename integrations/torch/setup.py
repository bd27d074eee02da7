"""Builds weft_torch, the torch.distributed backend "weft", against the torch
installed in this environment:

    pip install --no-build-isolation ./integrations/torch

(no build isolation: the extension must be compiled against the very torch it
will be loaded into). libweft comes from the repository's build directory
(WEFT_LIB_DIR, default ../../build) and is copied into the package, so the
installed package does not depend on the build tree staying where it is."""
import glob
import os
import shutil

# The build needs torch, not its plugins: an installed weft_torch that fails
# to load must not stop its own rebuild.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(here, "..", ".."))
include_dir = os.environ.get("WEFT_INCLUDE_DIR", os.path.join(repo, "include"))
lib_dir = os.environ.get("WEFT_LIB_DIR", os.path.join(repo, os.environ.get("BUILD_DIR", "build")))
if not glob.glob(os.path.join(lib_dir, "libweft.so*")):
    raise SystemExit(f"weft_torch: no libweft.so in {lib_dir}: build weft first (scripts/setup) "
                     "or set WEFT_LIB_DIR")


class BuildWithLibweft(BuildExtension):
    """Places libweft.so.0 beside the extension, which finds it through $ORIGIN."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "weft_torch")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.realpath(os.path.join(lib_dir, "libweft.so.0")),
                     os.path.join(dest, "libweft.so.0"))


sources = sorted(glob.glob(os.path.join("weft_torch", "csrc", "*.cpp")))
setup(
    name="weft_torch",
    version="0.1.0",
    description="weft as a torch.distributed backend (init_process_group('weft'))",
    packages=["weft_torch"],
    ext_modules=[
        CppExtension(
            "weft_torch._C",
            sources,
            include_dirs=[include_dir],
            library_dirs=[lib_dir],
            libraries=["weft"],
            extra_compile_args=["-O2", "-g0", "-Wall"],
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        )
    ],
    cmdclass={"build_ext": BuildWithLibweft},
    # torch imports every "torch.backends" entry point when it is imported, so
    # init_process_group("weft") works without an `import weft_torch`.
    entry_points={"torch.backends": ["weft = weft_torch._register:entry_point"]},
    python_requires=">=3.9",
)
