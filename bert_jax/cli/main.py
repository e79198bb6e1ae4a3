"""`bert-jax` console script: one subcommand per job; bad input is one line on stderr, exit 2."""

from __future__ import annotations

import logging
import os
import sys

from bert_jax import resources
from bert_jax.cli import conversion, env, flags, glue, jobs, use, vocab
from bert_jax.errors import BertJaxError
from bert_jax.runtime import multihost


def build_parser() -> flags.Parser:
    parser = flags.Parser(prog="bert-jax", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and INFO logs")
    parser.add_argument("--version", action="version", version=f"bert-jax {resources.VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (jobs, glue, conversion, use, vocab, env):
        group.add_parsers(sub)
    return parser


def _use_compilation_cache() -> None:
    """Keep XLA executables across runs in the user cache's xla/ (resources.cache_dir;
    BERT_JAX_XLA_CACHE moves it, "" turns it off): a resumed or repeated job skips the compile.
    Only compiles over a second are kept."""
    path = os.environ.get("BERT_JAX_XLA_CACHE")
    if path is None:
        path = resources.cache_dir("xla")
    if path:
        import jax
        jax.config.update("jax_compilation_cache_dir", os.path.abspath(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _quiet_background_errors() -> None:
    """Orbax's writer threads log a failed save's traceback, asyncio logs the same error as
    "never retrieved", and tensorstore callbacks racing a closed event loop print one; the
    failure reaches the foreground, which reports it in one line. Without --debug, keep those
    background tracebacks (not warnings) off stderr."""
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_below_error)  # adding it again is a no-op
    sys.unraisablehook = _log_unraisable


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR


def _log_unraisable(unraisable) -> None:
    logging.getLogger("bert_jax").debug("ignored in a background thread: %r",
                                        unraisable.exc_value)


def main(argv=None) -> int:
    argv = flags.normalize(list(sys.argv[1:] if argv is None else argv))
    argv, overrides = flags.split_overrides(argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # a usage error, already printed in one line, or --help
        return e.code
    args.overrides = overrides
    if overrides and args.command not in flags.OVERRIDABLE:
        print(f"bert-jax {args.command}: error: --config.{overrides[0]} is only for "
              f"{' and '.join(flags.OVERRIDABLE)}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.debug:
        _quiet_background_errors()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        _use_compilation_cache()
        code = args.run(args)
    except (BertJaxError, OSError) as e:
        if args.debug:
            raise
        if _collective_failed(e):  # a save whose barrier or gather lost a peer
            multihost.wait_for_lost_peer()
        message = flags.as_flags(args.command, str(e).splitlines()[0], overrides)
        return _ended(f"bert-jax {args.command}: error: {message}", 2)
    except KeyboardInterrupt:
        return _ended(f"bert-jax {args.command}: interrupted", 130)
    except Exception as e:  # a bug, or bad input nothing checked yet: still one line
        if args.debug:
            raise
        if _collective_failed(e):
            multihost.wait_for_lost_peer()  # the watchdog names the lost process and exits
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return _ended(f"bert-jax {args.command}: error: unexpected {type(e).__name__}: "
                      f"{first} (run with --debug for the traceback)", 1)
    multihost.finish()
    return code or 0


def _ended(line: str, code: int) -> int:
    """Print an error line and return its exit code; in a multi-process run, tell the other
    processes and end this one at once (a shutdown barrier would wait for them)."""
    if multihost.active():
        multihost.abort(line, code)
    print(line, file=sys.stderr)
    return code


def _collective_failed(error: BaseException) -> bool:
    """A runtime error of a multi-process run (or one it caused), as a dead peer causes: gloo's
    "Connection closed by peer", a barrier's DEADLINE_EXCEEDED."""
    seen = 0
    while multihost.active() and error is not None and seen < 10:
        if type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError"):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


if __name__ == "__main__":
    sys.exit(main())
