"""dna_mm: DnA (Denoising Attention) for video understanding and detection on OpenMMLab."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent


def read_requirements(name: str) -> list[str]:
    """Requirement lines of ``requirements/<name>.txt`` (comments dropped): version ranges; the
    exact versions tested are ``requirements/lock.txt``, which ``make install`` uses."""
    lines = (HERE / 'requirements' / name).read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith('#')]


setup(
    name='dna_mm',
    version='0.1.0',
    description='DnA (Denoising Attention) for video understanding and detection on OpenMMLab',
    long_description=(HERE / 'README.md').read_text() if (HERE / 'README.md').exists() else '',
    long_description_content_type='text/markdown',
    packages=find_packages(include=['dna_mm', 'dna_mm.*']),
    # the configs and the tools, as OpenMMLab's packages ship theirs: dna_mm/.mim/configs and
    # dna_mm/.mim/tools link to the repo's configs/ and tools/ (an editable install reads them
    # there), and the wheel holds copies (`_base_ = ['dna_mm::…']`, `python -m dna_mm.tools NAME`)
    package_data={
        'dna_mm': ['.mim/configs/**/*', '.mim/tools/**/*'],
        'dna_mm.datasets': ['label_maps/*.txt'],
    },
    exclude_package_data={'dna_mm': ['.mim/**/__pycache__/*', '.mim/**/*.pyc']},
    entry_points={'console_scripts': ['dna_mm = dna_mm.tools.__main__:main']},
    # 3.11: CI and `make install`; 3.12: `make test-pythons` and the GPU machines' image (scripts/device)
    python_requires='>=3.11,<3.14',
    install_requires=read_requirements('torch.txt') + read_requirements('runtime.txt'),
    extras_require={
        'tests': read_requirements('tests.txt'),
        'tensorboard': read_requirements('optional.txt'),
    },
    license='Apache-2.0',
)
