"""The scripted solution's methods (agent code: copied into the sandbox workspace and run there).

CT x4 z-SR: find which axial slices the degradation kept (between them the input is exactly linear in
z, so its second difference along z vanishes there), then rebuild every slice between two kept ones by
motion-compensated interpolation: the in-plane optical flow between the two kept slices (scikit-image
TV-L1) warps each towards the in-between position and the two are blended, so an oblique vessel moves
instead of cross-fading into two ghosts. Kept slices are left exactly as they are; geometry and HU kept.
MRI -> CT: inside the body mask, the MR (scaled by its 95th percentile there) is split into tissue classes by
geometry and intensity: the head is the body mask eroded back; the bright shell reaching its outline is scalp
(soft tissue), the bright volume it encloses is brain (HU interpolated from CSF through grey to white matter
by intensity), the dark band between them is CSF next to the brain and bone beyond it (brighter marrow, lower
HU); outside -1000 HU.
usage: python3 synth.py DATA_DIR OUT_DIR [CASE ...] [--limit N] [--normalised] [--scale S]
"""

import pathlib
import sys

import numpy as np

HU_AIR = -1000.0


def kept_phase(volume, scale):
    """(phase, residual) of the slices kept by a x`scale` decimation: the phase whose in-between slices are
    closest to linear in z."""
    d2 = np.abs(volume[:, :, 2:] - 2 * volume[:, :, 1:-1] + volume[:, :, :-2]).mean(axis=(0, 1))
    best = None
    for phase in range(scale):
        kept = set(range(phase, volume.shape[2], scale))
        between = [d2[k - 1] for k in range(1, volume.shape[2] - 1) if k not in kept]
        value = float(np.mean(between)) if between else 0.0
        if best is None or value < best[1]:
            best = (phase, value)
    return best


def flow_between(a, b, scale_hu=400.0):
    """In-plane flow (2, X, Y) with b(x + flow) ~ a(x), on soft-tissue-windowed slices."""
    from skimage.registration import optical_flow_tvl1

    wa = np.clip((a + 200.0) / scale_hu, 0, 1)
    wb = np.clip((b + 200.0) / scale_hu, 0, 1)
    # two warps of ten iterations: the same SSIM as three of fifteen on the demo (0.9785 against 0.9787,
    # PSNR within 0.03 dB) in 60 % of the time; the flow is most of the scripted run's batch step
    return optical_flow_tvl1(wa, wb, attachment=10, tightness=0.3, num_warp=2, num_iter=10)


def warp(image, flow, t):
    from scipy.ndimage import map_coordinates

    rows, cols = np.meshgrid(np.arange(image.shape[0]), np.arange(image.shape[1]), indexing="ij")
    return map_coordinates(image, [rows + t * flow[0], cols + t * flow[1]], order=1, mode="nearest")


def super_resolve(volume, scale):
    out = np.array(volume, dtype=np.float32)
    phase, _ = kept_phase(out, scale)
    kept = list(range(phase, out.shape[2], scale))
    for a_z, b_z in zip(kept[:-1], kept[1:], strict=True):  # noqa: RUF007 (agent code: Python 3.9 too)
        a, b = out[:, :, a_z].astype(np.float64), out[:, :, b_z].astype(np.float64)
        forward = flow_between(a, b)  # b(x + f) ~ a(x)
        # a(x - f) ~ b(x) where the flow is smooth: one TV-L1 solve per pair, not one each way (half the batch
        # step's CPU; on the demo's six volumes SSIM 0.9789 -> 0.9794, PSNR 39.89 -> 40.02 dB)
        backward = -forward
        for z in range(a_z + 1, b_z):
            t = (z - a_z) / (b_z - a_z)
            from_a = warp(a, backward, t)  # a moved a fraction t of the way towards b
            from_b = warp(b, forward, 1 - t)
            out[:, :, z] = (1 - t) * from_a + t * from_b
    return out


def synthesize_ct(mr, mask):
    """A tissue-class CT from a T1-weighted head MR and the body mask (see the module docstring)."""
    from scipy import ndimage

    inside = mask > 0
    rel = mr / max(float(np.percentile(mr[inside], 95)), 1e-6)
    bright = ndimage.binary_opening(inside & (rel >= 0.45), iterations=1)
    parts, count = ndimage.label(bright)
    rim = inside & ~ndimage.binary_erosion(inside, iterations=5)
    outer = set(np.unique(parts[rim & bright]).tolist()) - {0}  # the scalp: bright and reaching the outline
    sizes = ndimage.sum(bright, parts, range(1, count + 1))
    inner = [k + 1 for k in range(count) if k + 1 not in outer and sizes[k] >= 500]
    brain = ndimage.binary_fill_holes(np.isin(parts, inner))  # bright, enclosed by the dark skull: the brain
    head = ndimage.binary_erosion(inside, iterations=3) | brain  # the body mask is the head outline, dilated
    ct = np.full(mr.shape, HU_AIR, dtype=np.float32)
    ct[head] = 30.0  # scalp and other soft tissue
    band = head & ~brain & (rel < 0.45)  # dark between scalp and brain: CSF next to the brain, then bone
    csf = band & ndimage.binary_dilation(brain, iterations=1)
    bone = band & ~csf
    ct[csf] = 8.0
    ct[bone] = np.clip(1600.0 - 2570.0 * (rel - 0.05), 700.0, 1600.0)[bone]  # marrow: brighter MR, lower HU
    ct[brain] = np.interp(rel, [0.15, 0.6, 0.95], [8.0, 40.0, 28.0])[brain]  # CSF, grey, white matter
    return ndimage.gaussian_filter(ct, 0.5)


def run_case(data, out, case, scale, normalised):
    sys.modules.setdefault("pydicom", None)  # NIfTI only: nibabel's DICOM extension (pydicom, requests) unused
    import nibabel as nib

    folder = data / case
    if (folder / "ct.nii.gz").exists():
        image = nib.load(str(folder / "ct.nii.gz"))
        result = super_resolve(np.asarray(image.dataobj, dtype=np.float32), scale)
    else:
        image = nib.load(str(folder / "mr.nii.gz"))
        mask = np.asarray(nib.load(str(folder / "mask.nii.gz")).dataobj)
        result = synthesize_ct(np.asarray(image.dataobj, dtype=np.float32), mask)
    if normalised:  # the flawed variant: the [0, 1] network scale left in place, HU never restored
        result = np.clip((result + 1024.0) / 4095.0, 0.0, 1.0)
    result = result.astype(np.float32)
    (out / case).mkdir(parents=True, exist_ok=True)
    sct = nib.Nifti1Image(result, image.affine, image.header)
    sct.set_data_dtype(result.dtype)
    nib.save(sct, str(out / case / "sct.nii.gz"))
    print(case, result.shape, f"HU range [{float(result.min()):.0f}, {float(result.max()):.0f}]")


def main(argv):
    normalised = "--normalised" in argv
    argv = [a for a in argv if a != "--normalised"]
    limit, scale = None, 4
    for flag in ("--limit", "--scale"):
        if flag in argv:
            at = argv.index(flag)
            value = int(argv[at + 1])
            argv = argv[:at] + argv[at + 2:]
            limit, scale = (value, scale) if flag == "--limit" else (limit, value)
    data, out, wanted = pathlib.Path(argv[0]), pathlib.Path(argv[1]), argv[2:]
    cases = wanted or sorted(p.name for p in data.iterdir() if p.is_dir())
    for case in cases[:limit]:
        run_case(data, out, case, scale, normalised)


if __name__ == "__main__":
    main(sys.argv[1:])
