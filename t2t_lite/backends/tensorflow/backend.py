"""The TensorFlow wing's Backend: tf.distribute strategies, the Trainer's update, tf.data batches,
the TensorFlowTranslator (its tf.function search, which the SavedModel exports)."""

from t2t_lite.backends.base import Backend
from t2t_lite.utils.errors import UserError


class TensorFlowBackend(Backend):
    name = "tensorflow"

    def import_framework(self):
        from t2t_lite.backends.tensorflow.quiet import import_tensorflow_quietly

        import_tensorflow_quietly()

    def distribution(self, strategy=None):
        from t2t_lite.backends.tensorflow.distribution import create_strategy, of_strategy

        return of_strategy(create_strategy(strategy) if strategy else None)

    def trainer(self, hparams, vocab_size, distribution=None, jit_compile=False):
        from t2t_lite.backends.tensorflow.trainer import Trainer

        if hparams.model_parallel > 1:
            raise UserError(f"model_parallel={hparams.model_parallel} splits weights with "
                            "keras.distribution.ModelParallel, which is JAX's: train with "
                            "KERAS_BACKEND=jax, or drop it")
        if hparams.packed_length:
            raise UserError(f"packed_length={hparams.packed_length} packs the JAX path's "
                            "batches: train with KERAS_BACKEND=jax, or drop it")
        return Trainer(hparams, vocab_size, distribution.handle if distribution else None,
                       jit_compile)

    def training_data(self, problem, data_dir, hparams, seed, distribution):
        def dataset_fn(input_context):
            return problem.dataset("train", data_dir, hparams, training=True,
                                   input_context=input_context, seed=seed)

        return dataset_fn

    def translate_on_devices(self, translator, distribution):
        from t2t_lite.backends.tensorflow.replicated import ReplicatedTranslation

        return ReplicatedTranslation(translator, distribution.handle)

    def data_errors_named(self, problem, data_dir):
        from t2t_lite.backends.tensorflow.pipeline import damaged_data_named

        return damaged_data_named(problem, data_dir)

