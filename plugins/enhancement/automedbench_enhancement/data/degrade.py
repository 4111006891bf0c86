"""How the low-quality inputs are made: CT noise (image-domain NPS or Poisson in a sinogram) and k-space truncation.

LDCT, default ("nps"): white noise shaped by a ramp x Hann power spectrum (what filtered back-projection
gives noise), scaled to `sigma_hu` inside the body and 0.4 of it in air. Fast (tens of ms at 512²).
LDCT, optional ("sinogram"): the reference's attenuation is projected (skimage radon), Poisson counts at
`i0` photons per ray are drawn, and only the reconstructed noise (iradon of noisy - clean line
integrals, ramp filter) is added to the reference, so the reference is not blurred by a second FBP.
MRI x2: keep the central half of k-space in each axis (a real acquisition at half the matrix), then the
magnitude; zero-filling that k-space back is the natural classical inverse.
"""

from __future__ import annotations

import numpy as np

MU_WATER_PER_MM = 0.0192  # linear attenuation of water near 70 keV


def body_mask(hu: np.ndarray) -> np.ndarray:
    from scipy import ndimage

    return ndimage.gaussian_filter((hu > -500).astype(np.float64), 3) > 0.5


def nps_noise(shape: tuple[int, int], sigma_hu: float, seed: int, body: np.ndarray | None = None,
              f_cut: float = 0.35) -> np.ndarray:
    """Correlated CT-like noise: ramp spectrum rolled off by a Hann window at `f_cut` cycles/pixel."""
    rng = np.random.default_rng(seed)
    f = np.hypot(np.fft.fftfreq(shape[0])[:, None], np.fft.fftfreq(shape[1])[None, :])
    spectrum = f * np.where(f < f_cut, 0.5 * (1 + np.cos(np.pi * f / f_cut)), 0.0)
    noise = np.real(np.fft.ifft2(np.fft.fft2(rng.standard_normal(shape)) * spectrum))
    noise /= noise.std()
    if body is not None:
        noise *= np.where(body, 1.0, 0.4)
    return sigma_hu * noise


def sinogram_noise(hu: np.ndarray, pixel_mm: float, i0: float, views: int, seed: int) -> np.ndarray:
    """FBP-reconstructed Poisson noise (in HU) for `hu` scanned with `i0` photons per ray and `views` angles."""
    from skimage.transform import iradon, radon

    rng = np.random.default_rng(seed)
    n = hu.shape[0]
    yy, xx = np.mgrid[:n, :n]
    fov = (yy - (n - 1) / 2) ** 2 + (xx - (n - 1) / 2) ** 2 <= (n / 2 - 1) ** 2
    mu = np.where(fov, np.maximum(MU_WATER_PER_MM * (1 + hu / 1000.0), 0.0) * pixel_mm, 0.0)
    theta = np.linspace(0.0, 180.0, views, endpoint=False)
    clean = radon(mu, theta=theta, circle=True)
    counts = rng.poisson(i0 * np.exp(-clean))
    noisy = -np.log(np.maximum(counts, 1) / i0)
    noise = iradon(noisy - clean, theta=theta, filter_name="ramp", circle=True)
    return noise / pixel_mm / MU_WATER_PER_MM * 1000.0


def low_dose(hu: np.ndarray, params: dict, seed: int, pixel_mm: float) -> np.ndarray:
    mode = params.get("noise", "nps")
    if mode == "nps":
        return hu + nps_noise(hu.shape, float(params["sigma_hu"]), seed, body_mask(hu))
    if mode == "sinogram":
        return hu + sinogram_noise(hu, pixel_mm, float(params["i0"]), int(params["views"]), seed)
    raise ValueError(f"unknown LDCT noise mode {mode!r} (nps or sinogram)")


def kspace_down(hr: np.ndarray) -> np.ndarray:
    """Keep the central (H/2, W/2) of k-space: the image a half-matrix acquisition gives (same intensity scale)."""
    h, w = hr.shape
    k = np.fft.fftshift(np.fft.fft2(hr))
    centre = k[h // 4:h // 4 + h // 2, w // 4:w // 4 + w // 2]
    return np.abs(np.fft.ifft2(np.fft.ifftshift(centre))) / 4.0


def zero_fill_up(lr: np.ndarray) -> np.ndarray:
    """The inverse that knows the degradation: pad k-space with zeros to twice the matrix (sinc interpolation)."""
    h, w = lr.shape
    big = np.zeros((2 * h, 2 * w), dtype=complex)
    big[h // 2:h // 2 + h, w // 2:w // 2 + w] = np.fft.fftshift(np.fft.fft2(lr))
    return np.abs(np.fft.ifft2(np.fft.ifftshift(big))) * 4.0
