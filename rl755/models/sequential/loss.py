"""The compiled training and validation steps of stage 4, on every replica of a strategy.

    train_step, val_step = loss.make_steps(model, optimizer, strategy, task, jit_compile=True,
                                           shards=2, clip_norm=1.0)
    loss_value, terms = train_step(train_iterator)   # one optimizer update, summed over replicas

The loss is the masked mean over the whole global batch (counts are summed across replicas), so
N devices compute the same loss and gradients as one. With `jit_compile` the loss and gradients
of each of the batch's `shards` parts are taken inside one XLA call each (the loss is linear in
the parts' sums); the cross-replica sums and the optimizer stay outside XLA. `clip_norm` > 0
clips the replicas' summed gradient to that global norm; its norm before clipping comes back in
`terms[GRADIENT_NORM]`.
"""

from __future__ import annotations

import tensorflow as tf

from rl755.models.sequential import sharding

GRADIENT_NORM = "_gradient_norm"  # (carried beside the loss terms out of the replicas)


def make_steps(model, optimizer, strategy, task, jit_compile: bool, shards: int, clip_norm: float):
    """(train_step, val_step): tf.functions of a distributed iterator -> (loss, {term: mean})."""
    replicas = strategy.num_replicas_in_sync

    def loss_sums(batch, step, training):
        return model.task_loss_sums(batch, task, step, training=training)

    def global_counts(counts):
        return tf.distribute.get_replica_context().all_reduce("sum", counts)

    def mean_terms(sums, counts):
        return {k: sums[k] / tf.maximum(counts[k], 1.0) for k in sums}

    def nonzero(grads):
        # A head the task does not use (an infilling head in autoregressive training) has no
        # gradient: it gets a zero one (a head never trained stays as it is).
        return [
            tf.zeros_like(v) if g is None else g for g, v in zip(grads, model.trainable_variables)
        ]

    if jit_compile:
        uncompiled_loss_sums = loss_sums
        loss_sums = tf.function(loss_sums, jit_compile=True)

        @tf.function(jit_compile=True)
        def batch_counts(batch, step):
            # The counts depend on the masks alone: XLA drops the model from this call.
            return uncompiled_loss_sums(batch, step, True)[1]

        @tf.function(jit_compile=True)
        def part_gradients(part, step, counts):
            """A part's loss sums and the gradient of its share of the loss."""
            with tf.GradientTape() as tape:
                sums, _ = uncompiled_loss_sums(part, step, True)
                share = model.combine_loss_terms(mean_terms(sums, counts))
            return sums, nonzero(tape.gradient(share, model.trainable_variables))

    def replica_losses(batch, training):
        step = tf.convert_to_tensor(optimizer.iterations)
        sums, counts = loss_sums(batch, step, training)
        terms = mean_terms(sums, global_counts(counts))
        return model.combine_loss_terms(terms), terms

    def replica_gradients(batch):
        """(loss, terms, gradients) of this replica's batch."""
        if not jit_compile:
            with tf.GradientTape() as tape:
                loss, terms = replica_losses(batch, True)
            return loss, terms, nonzero(tape.gradient(loss, model.trainable_variables))
        step = tf.convert_to_tensor(optimizer.iterations)
        counts = global_counts(batch_counts(batch, step))
        parts = sharding.split_batch(batch, shards) if shards > 1 else [batch]
        outs = [part_gradients(part, step, counts) for part in parts]
        sums = {k: tf.add_n([o[0][k] for o in outs]) for k in outs[0][0]}
        grads = [tf.add_n([o[1][i] for o in outs]) for i in range(len(outs[0][1]))]
        terms = mean_terms(sums, counts)
        return model.combine_loss_terms(terms), terms, grads

    def train_replica(batch):
        loss, terms, grads = replica_gradients(batch)
        if clip_norm:
            # Clip the whole gradient (the replicas' sum); the optimizer then sums the
            # replicas' shares again, so each passes 1/N of the clipped sum.
            total = tf.distribute.get_replica_context().all_reduce("sum", grads)
            clipped, norm = tf.clip_by_global_norm(total, clip_norm)
            grads = [g / replicas for g in clipped]
            terms = {**terms, GRADIENT_NORM: norm / replicas}  # (reduce sums the replicas')
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, terms

    def reduce(per_replica):
        return tf.nest.map_structure(
            lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), per_replica
        )

    @tf.function
    def train_step(iterator):
        return reduce(strategy.run(train_replica, args=(next(iterator),)))

    @tf.function
    def val_step(iterator):
        return reduce(strategy.run(lambda b: replica_losses(b, False), args=(next(iterator),)))

    return train_step, val_step
