"""AutoMedBench synthesis track: CT x4 z super-resolution and head-and-neck MRI -> CT (mean axial SSIM in HU)."""
