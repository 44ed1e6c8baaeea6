"""kubetrain: a kopf operator that runs Horovod/TensorFlow training as a DistributedTraining resource."""
