"""The scripted solution's enhancement method (agent code: copied into the sandbox workspace and run there).

LDCT: scikit-image non-local means on the HU image windowed to [-1024, 3071] and scaled to [0, 1], with
the noise level estimated from the image, then back to HU. MRI x2: zero-filled k-space (the input is a
k-space centre, so padding k-space with zeros is the matched inverse), clipped to [0, 1].
usage: python3 enhance.py DATA_DIR OUT_DIR [CASE ...] [--limit N] [--int16]
"""

import json
import pathlib
import sys

import numpy as np

LO, HI = -1024.0, 3071.0


def noise_sigma(x):
    from scipy import ndimage

    residual = x - ndimage.gaussian_filter(x, 3)
    return 1.7 * 1.4826 * float(np.median(np.abs(residual - np.median(residual))))


def denoise_ct(hu):
    from skimage.restoration import denoise_nl_means

    x = (np.clip(hu, LO, HI) - LO) / (HI - LO)
    sigma = noise_sigma(x)
    out = denoise_nl_means(x, h=sigma, sigma=sigma, patch_size=7, patch_distance=6, fast_mode=True)
    return out * (HI - LO) + LO


def zero_fill(lr):
    h, w = lr.shape
    big = np.zeros((2 * h, 2 * w), dtype=complex)
    big[h // 2:h // 2 + h, w // 2:w // 2 + w] = np.fft.fftshift(np.fft.fft2(lr))
    return np.clip(np.abs(np.fft.ifft2(np.fft.ifftshift(big))) * 4.0, 0.0, 1.0)


def enhance(image, meta):
    if meta["units"] == "HU":
        return denoise_ct(image)
    return zero_fill(image)


def main(argv):
    as_int = "--int16" in argv  # the wrong-format variant: rounded integers break the float contract
    argv = [a for a in argv if a != "--int16"]
    limit = None
    if "--limit" in argv:
        at = argv.index("--limit")
        limit = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    data, out, wanted = pathlib.Path(argv[0]), pathlib.Path(argv[1]), argv[2:]
    cases = wanted or sorted(p.name for p in data.iterdir() if (p / "input.npy").is_file())
    for case in cases[:limit]:
        image = np.load(data / case / "input.npy", allow_pickle=False)
        meta = json.loads((data / case / "meta.json").read_text())
        result = enhance(image.astype(np.float64), meta)
        (out / case).mkdir(parents=True, exist_ok=True)
        np.save(out / case / "enhanced.npy", np.rint(result).astype(np.int16) if as_int else result.astype(np.float32))
        print(case, image.shape, "->", result.shape, f"range [{result.min():.3f}, {result.max():.3f}]")


if __name__ == "__main__":
    main(sys.argv[1:])
