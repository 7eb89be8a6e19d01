"""Prints the sequential model table generated from rl755/models/catalogue.py's registrations.

    python scripts/dev/model_table.py            # print it
    python scripts/dev/model_table.py --write    # replace it in docs/models.md (between markers)

tests/test_catalogue_docs.py fails when a page holds anything else.
"""

import os

from absl import app, flags

from rl755.models import model_table

flags.DEFINE_bool("write", False, "Replace the table in the docs pages instead of printing it.")
FLAGS = flags.FLAGS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv):
    del argv
    if not FLAGS.write:
        print(model_table.table())
        return
    for page in model_table.PAGES:
        changed = model_table.update_page(os.path.join(REPO, page))
        print(f"{'Updated' if changed else 'Unchanged'}: {page}")


if __name__ == "__main__":
    app.run(main)
