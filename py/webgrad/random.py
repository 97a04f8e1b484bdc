"""torch.random: the default generator's seeding and state (ops/generator.py), under torch's module name."""
from .ops.generator import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["Generator", "default_generator", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]
