"""Translation on every local replica of a tf.distribute strategy at once, for the TensorFlow
trainer's evaluations under MirroredStrategy: one batch per replica at a time, through one
traced function that every evaluation reuses."""

import tensorflow as tf

from t2t_lite.backends.tensorflow.distribution import worker_index


class ReplicatedTranslation:
    """Translates token lists with `translator` (a decoding.translator.Translator) on the local
    replicas of `strategy`; a callable like translator.translate_tokens."""

    def __init__(self, translator, strategy):
        self.translator = translator
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync // worker_index(strategy)[1]
        self._step = tf.function(
            lambda ids: strategy.experimental_local_results(
                strategy.run(lambda replica_ids: translator.translate_ids(replica_ids),
                             args=(ids,))),
            reduce_retracing=True, autograph=False)

    def __call__(self, token_lists, progress=None):
        if self.replicas == 1:
            return self.translator.translate_tokens(token_lists, progress)
        results = [None] * len(token_lists)
        batches = list(self.translator.batches(token_lists))
        for start in range(0, len(batches), self.replicas):
            group = batches[start:start + self.replicas]
            group += group[-1:] * (self.replicas - len(group))  # every replica takes part
            ids = self.strategy.experimental_distribute_values_from_function(
                lambda context, group=group: group[
                    context.replica_id_in_sync_group % self.replicas][1])
            for (chunk, _), translated in zip(group, self._step(ids)):
                self.translator.collect(results, chunk, translated)
            if progress:
                progress.update(sum(len(c) for c, _ in batches[start:start + self.replicas]))
        return results
