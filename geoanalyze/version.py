"""The package version, in the bottom layer so any module can name it without importing the package root."""

__version__ = "0.1.0"
