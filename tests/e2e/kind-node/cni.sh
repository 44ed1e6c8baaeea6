#!/usr/bin/env bash
# The plain pod network of kind clusters made with disableDefaultCNI (our locally built node image has no kindnetd,
# which is not on the Go module proxy): on every node, the CNI plugins kind itself uses (ptp + host-local over the
# node's podCIDR, portmap) and a route to each other node's podCIDR via that node's address. Pod traffic between nodes
# is routed, never masqueraded, so every pod sees its peers' real addresses (as MPI needs). Pods have no route out of
# the cluster, which our tests do not need.
# Usage: cni.sh CLUSTER   (KUBECONFIG must point at the cluster; DOCKER, KIND, KUBECTL: the binaries to use)
set -euo pipefail
cluster=$1
DOCKER=${DOCKER:-docker}
KIND=${KIND:-kind}
KUBECTL=${KUBECTL:-kubectl}

declare -A cidr address
nodes=$("$KIND" get nodes --name "$cluster")
for node in $nodes; do
  for _ in $(seq 60); do # the node controller assigns the podCIDR shortly after the node registers
    cidr[$node]=$("$KUBECTL" get node "$node" --output=jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
    [ -n "${cidr[$node]}" ] && break
    sleep 2
  done
  [ -n "${cidr[$node]}" ] || { echo "cni: node $node got no podCIDR" >&2; exit 1; }
  address[$node]=$("$KUBECTL" get node "$node" \
    --output=jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
done

for node in $nodes; do
  "$DOCKER" exec -i "$node" sh -c 'cat >/etc/cni/net.d/10-kubetrain.conflist' <<EOF
{
  "cniVersion": "0.3.1",
  "name": "kubetrain",
  "plugins": [
    {"type": "ptp", "ipMasq": false, "mtu": 1500,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${cidr[$node]}"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  for other in $nodes; do
    [ "$other" = "$node" ] && continue
    "$DOCKER" exec "$node" ip route replace "${cidr[$other]}" via "${address[$other]}"
  done
  echo "cni: $node pods ${cidr[$node]} (node ${address[$node]})"
done
