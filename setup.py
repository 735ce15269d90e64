"""Installs t2t_lite; problems/ and hparams/ ship as t2t_lite.problems and t2t_lite.hparams."""
import setuptools

setuptools.setup(
    name="t2t_lite",
    version="0.1.0",
    description="Train, evaluate, decode and serve sequence-to-sequence Transformers "
    "(Vaswani et al. 2017) with Keras 3 and TensorFlow.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=["t2t_lite", "t2t_lite.cli", "t2t_lite.problems", "t2t_lite.hparams"],
    package_dir={
        "t2t_lite": "t2t_lite",
        "t2t_lite.problems": "problems",
        "t2t_lite.hparams": "hparams",
    },
    install_requires=[
        # The plain `tensorflow` wheel runs on CPU and GPU; tensorflow-text requires it anyway.
        "tensorflow>=2.16",
        "keras>=3.3",
        "tensorboard>=2.16",
        "keras-hub>=0.18",
        "tensorflow-text>=2.16",
        "sentencepiece>=0.2",
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets needs it to prepare any data set, but does not declare it.
        "importlib_resources>=5.0",
        "sacrebleu>=2.4",
        "numpy>=1.26",
    ],
    extras_require={
        # CUDA libraries for GPU training, as TensorFlow packages them.
        "gpu": ["tensorflow[and-cuda]>=2.16"],
        "test": ["pytest>=8.0"],
    },
    entry_points={
        "console_scripts": [
            "t2t-lite-trainer=t2t_lite.cli.trainer:run",
            "t2t-lite-datagen=t2t_lite.cli.datagen:run",
            "t2t-lite-decoder=t2t_lite.cli.decoder:run",
            "t2t-lite-avg-checkpoints=t2t_lite.cli.avg_checkpoints:run",
            "t2t-lite-exporter=t2t_lite.cli.exporter:run",
            "t2t-lite-make-tf-configs=t2t_lite.cli.make_tf_configs:run",
        ],
    },
)
