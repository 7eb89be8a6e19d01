"""Generated mutants judged equivalent by hand: they change nothing a user can see.

`scripts/dev/mutate.py --sample` counts these apart, not in the score. Each entry names the
mutant (mutmut's name, stable while its function is unchanged) and the kind of reason; KINDS
says what each kind means. A function that changes renumbers its mutants: an entry that no
longer matches a mutant is simply not counted.
"""

KINDS = {
    "overwritten-before-read": "an initial value that every valid use replaces before reading it",
}

EQUIVALENT = {
    # FaultyEnv.__init__: _steps = 1 for 0; reset(), which gymnasium requires before the first
    # step, sets it to 0 again.
    "rl755.testing.faulty_env.xǁFaultyEnvǁ__init____mutmut_4": "overwritten-before-read",
}
