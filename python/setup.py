"""gpured's optional C extension, gpured._fast (the blocking client's
per-request work, src/fast); everything else is in pyproject.toml.

Where it cannot be built (no C compiler, no Python.h: Debian's
python3-dev), the package installs without it, saying so, and the client
runs on pure Python, as it also does with GPURED_PURE_PYTHON=1."""

import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns rather than fails: the extension only makes
    calls cheaper."""

    def run(self):
        try:
            super().run()
        except Exception as e:      # no compiler at all, on some platforms
            self._skip(e)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(e)

    def _skip(self, e):
        self.warn("gpured._fast (the C extension) was not built: %s; "
                  "gpured runs on pure Python" % (e,))


setup(
    ext_modules=[Extension("gpured._fast", sorted(glob.glob("src/fast/*.c")),
                           depends=sorted(glob.glob("src/fast/*.h")), optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)
