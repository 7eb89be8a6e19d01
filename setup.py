"""rl755: a TensorFlow 2 toolkit for model-based reinforcement learning research."""

from setuptools import find_packages, setup

setup(
    name="rl755",
    version="0.1.0",
    description="World-Models-style model-based RL on TensorFlow 2: rollouts, encoders, "
    "sequential models and CMA-ES controllers, on a laptop or a SLURM cluster.",
    packages=find_packages(include=["rl755", "rl755.*"]),
    # The trained models shipped in the repository (README "Shipped models").
    package_data={"rl755.zoo": ["shipped/*.md", "shipped/*/*/*"]},
    python_requires=">=3.11,<3.12",
    # The pinned working set lives in requirements.txt (installed by `make`).
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorboard>=2.21,<2.22",
        "tensorflow-probability>=0.25,<0.26",
        "tf-keras>=2.21,<2.22",
        "gymnasium[box2d]>=1.4,<1.5",
        "ray>=2.60",
        "cma>=4.5",
        "absl-py>=2.5",
        "faiss-cpu>=1.15",
        "numpy>=2.0",
        "tqdm",
        "imageio",
        "pillow",
        "matplotlib",
    ],
)
