"""The wheel is for one platform (it carries Linux x86-64 binaries) but any Python 3."""
from setuptools import setup
from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False  # binaries inside: never a pure-Python wheel

    def get_tag(self):
        # The binaries do not load Python (ctypes and a child process), so
        # every Python 3 takes the same wheel.
        return "py3", "none", "linux_x86_64"


setup(cmdclass={"bdist_wheel": PlatformWheel})
