"""Trainer v2.3's runtime plugins (``pkg/runtime/framework/plugins``), one module each.

The renderer (``planning.jobset``) merges the runtime and the TrainJob's patches into the
JobSet's replicated jobs, then lets every plugin that ``applies`` act on the shared
:class:`Context`, in Trainer's phases:

1. ``ml_policy`` (EnforceMLPolicy): node counts, env, ports, containers, volumes;
2. ``pod_group`` (EnforcePodGroupPolicy): pod labels and annotations;
3. after the JobSet is built, ``objects`` (ComponentBuilder): the other objects Trainer
   creates for the TrainJob (a PodGroup, MPI's Secret and ConfigMap), owned by it.

A plugin raises ``UnsupportedRuntime`` for what it does not reproduce and ``BuildRefused``
where Trainer itself fails the build. Pure: no I/O, no clock.
"""
