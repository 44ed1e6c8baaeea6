"""kubetrain training program: cifar_mixup."""
