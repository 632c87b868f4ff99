# The one place the Python package's version is written; it follows the
# project's version in meson.build (tests/test_version.py checks that).
__version__ = "0.1.0"
