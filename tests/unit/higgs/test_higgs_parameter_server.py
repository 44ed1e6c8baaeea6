"""The parameter server's weight vectors (its MPI exchanges run in the jobs tier, under mpirun)."""

import numpy as np
import pytest

from higgs.parameter_server import flatten, unflatten


def test_weights_round_trip_through_one_float32_vector():
    arrays = [np.arange(6, dtype=np.float64).reshape(2, 3), np.array([7.5], np.float32), np.ones((2, 2, 2))]
    vector = flatten(arrays)
    assert vector.dtype == np.float32 and vector.shape == (15,)
    for original, restored in zip(arrays, unflatten(vector, [a.shape for a in arrays]), strict=True):
        np.testing.assert_array_equal(original, restored)


def test_a_vector_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="does not hold arrays of shapes"):
        unflatten(np.zeros(5, np.float32), [(2, 3)])
