"""Generated mutants judged equivalent by hand: they change nothing a user can see.

`scripts/dev/mutate.py --sample` counts these apart, not in the score. Each entry names the
mutant (mutmut's name, stable while its function is unchanged) and the kind of reason; KINDS
says what each kind means. A function that changes renumbers its mutants: an entry that no
longer matches a mutant is simply not counted.
"""

KINDS = {}

EQUIVALENT = {}
