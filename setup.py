"""Package layout: the repository folders flows/, tasks/, schemas/, models/ install as nodewatch.flows, …

Metadata lives in pyproject.toml; only the package mapping is computed here (every sub-package of the
four folders, so a new capability folder needs no edit). No top-level ``flows``/``tasks``/``schemas``/
``models`` module is installed.
"""

from setuptools import find_packages, setup

ROOTS = ("flows", "tasks", "schemas", "models")

packages = ["nodewatch"]
for root in ROOTS:
    packages += [f"nodewatch.{root}"] + [f"nodewatch.{root}.{sub}" for sub in find_packages(root)]

setup(packages=packages, package_dir={"nodewatch": "nodewatch", **{f"nodewatch.{r}": r for r in ROOTS}})
