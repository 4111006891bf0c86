"""The enhancement track: LDCT denoising and MRI x2 super-resolution, scored by mean SSIM."""
