"""Package discovery only (metadata lives in pyproject.toml).

The top-level folders converters/, visualizers/ and feeder/ install as chakra.converters,
chakra.visualizers and chakra.feeder. Subpackages are found at build time so a new converter
package needs no edit here. Folders of data files without an `__init__.py` (chakra/data/...) are
listed as packages too: setuptools ships package data only from listed packages, and warns at
length about every importable folder left out of the list.
"""

from setuptools import find_namespace_packages, setup

ROOTS = {
    "chakra": "chakra",
    "chakra.converters": "converters",
    "chakra.visualizers": "visualizers",
    "chakra.feeder": "feeder",
}

packages = []
for namespace, folder in ROOTS.items():
    packages.append(namespace)
    found = find_namespace_packages(folder, exclude=["*__pycache__*", "__pycache__"])
    packages.extend(f"{namespace}.{sub}" for sub in found)

setup(packages=sorted(set(packages)), package_dir=ROOTS)
