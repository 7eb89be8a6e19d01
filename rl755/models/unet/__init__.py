"""The infilling U-Net over frames: the model with its patch discriminator, loop and trainer."""
