"""Kept for tools that still call setup.py; the metadata lives in pyproject.toml."""
import setuptools

setuptools.setup()
