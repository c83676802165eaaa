"""Regenerate the output blocks of docs/usage.md (or another page) from the commands they show (see usage_blocks.py).

python tests/docs/regenerate_usage.py                 # every session (minutes: real corpora, real models)
python tests/docs/regenerate_usage.py --session drift # one session
python tests/docs/regenerate_usage.py --page docs/long-context.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from usage_blocks import PAGE, REPO_ROOT, blocks, fresh_outputs, sessions, with_outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", action="append", help="regenerate only this session (repeatable)")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page (default docs/usage.md)")
    args = parser.parse_args(argv)
    page = args.page if args.page.is_absolute() else REPO_ROOT / args.page
    text = page.read_text(encoding="utf-8")
    known = set(sessions(blocks(text)))
    unknown = set(args.session or ()) - known
    if unknown:
        parser.error(f"no session {', '.join(sorted(unknown))}; the page has {', '.join(sorted(known))}")
    fresh = fresh_outputs(text, set(args.session) if args.session else None)
    # the page as it is now (edited elsewhere while the commands ran, perhaps)
    page.write_text(with_outputs(page.read_text(encoding="utf-8"), fresh), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
