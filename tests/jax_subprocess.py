"""The environment of the tests' JAX subprocesses: Keras's JAX backend on the CPU, optionally
over several virtual devices, and two settings that make them cheaper on the 2 cores the suite
runs on: glibc's malloc setting for all of them (their outputs stay the same), and FAST_COMPILE
where a test asks for it (its outputs agree to the tests' tolerances).

glibc's malloc: XLA:CPU allocates and frees its buffers on every step, and glibc serves each one
above its mmap threshold (128 KiB, dynamically raised to at most 32 MiB) with an mmap and an
munmap, whose page faults were about half of a JAX trainer's system time. A threshold above any
buffer of these models keeps them in the heap. Measured alone on 2 cores (AMD EPYC,
2026-12-05), the jax_demo trainer of tests/test_jax_training.py twice each way: system CPU 8.8
and 8.5 s -> 4.8 and 3.9 s, wall 33.0 and 32.8 s -> 30.9 and 30.1 s, the same final evaluation.
A TensorFlow trainer gains nothing from it, so only these processes get it.
"""

import os

# Each of test_jax_backend's jobs compiles a dozen small programs and runs each a few times:
# without LLVM's optimizations XLA compiles them sooner (measured alone, 2 cores: the four jobs
# without a trained model, 78.3 -> 64.7 s), and they agree with TensorFlow and the exhaustive
# search to the same tolerances. The trainers that learn a task keep the optimizations.
FAST_COMPILE = "--xla_backend_optimization_level=0"
MALLOC_IN_THE_HEAP = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824"
# The line that makes `import tensorflow` fail in a `python -c` program: the JAX path must not
# need it, as on a GPU or TPU machine without it.
NO_TENSORFLOW = "import sys; sys.modules['tensorflow'] = None; "


def jax_environment(devices=None, fast_compile=False, **more):
    """This process's environment for a JAX subprocess on the CPU: with `devices`, that many
    virtual CPU devices; with `fast_compile`, FAST_COMPILE; `more` added last."""
    flags = [f"--xla_force_host_platform_device_count={devices}"] if devices else []
    flags += [FAST_COMPILE] if fast_compile else []
    environment = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    environment.setdefault("GLIBC_TUNABLES", MALLOC_IN_THE_HEAP)  # unless the user set theirs
    if flags:
        environment["XLA_FLAGS"] = " ".join(flags)
    return {**environment, **more}
