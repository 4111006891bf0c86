"""Fixed phrases of the checker's per-case reasons; the error-code detectors match them.

Apart from contract.py so that the detectors (loaded when plugins are listed) import no numpy."""

UNKNOWN_CLASS = "unknown class"
BAD_SCORE = "score outside [0, 1]"
OUTSIDE = "outside the image"
SWAP_HINT = "fits if x and y are swapped"
