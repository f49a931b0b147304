"""Package discovery only (metadata lives in pyproject.toml).

The top-level folders converters/, visualizers/ and feeder/ install as chakra.converters,
chakra.visualizers and chakra.feeder. Subpackages are found at build time so a new converter
package needs no edit here.
"""

from setuptools import find_packages, setup

ROOTS = {
    "chakra": "chakra",
    "chakra.converters": "converters",
    "chakra.visualizers": "visualizers",
    "chakra.feeder": "feeder",
}

packages = []
for namespace, folder in ROOTS.items():
    packages.append(namespace)
    packages.extend(f"{namespace}.{sub}" for sub in find_packages(folder))

setup(packages=sorted(set(packages)), package_dir=ROOTS)
