"""The operator's runtime layer: watches that list and watch each kind (watch), the store they feed (store, with
informers joining them on the event loop), the per-job work queue (queue) and leader election on a Lease (leader).
Nothing here knows what a DistributedTraining is: kubetrain.controller puts it together."""
