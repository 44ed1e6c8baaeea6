{{/* Names and labels shared by every template. */}}

{{- define "kubetrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "<release>-kubetrain", or the release name when it already contains the chart name; 52 characters at most so
     suffixes such as "-metrics" still fit a 63-character name. */}}
{{- define "kubetrain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubetrain.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the operator pod; never change between upgrades. */}}
{{- define "kubetrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubetrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "kubetrain.labels" -}}
helm.sh/chart: {{ include "kubetrain.chart" . }}
{{ include "kubetrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubetrain
{{- end }}

{{- define "kubetrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubetrain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount the operator runs as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image of the chart: "<imageRegistry>/<repository>:<tag or appVersion>" (no prefix when imageRegistry is empty). */}}
{{- define "kubetrain.imageName" -}}
{{- $root := index . 0 }}{{- $image := index . 1 }}
{{- $repository := $image.repository }}
{{- with $root.Values.imageRegistry }}{{ $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}{{ end }}
{{- printf "%s:%s" $repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}

{{- define "kubetrain.image" -}}
{{- include "kubetrain.imageName" (list . .Values.image) }}
{{- end }}

{{/* The image every job pod's init container copies the entrypoints from. */}}
{{- define "kubetrain.entrypointsImage" -}}
{{- include "kubetrain.imageName" (list . .Values.entrypoints.image) }}
{{- end }}

{{/* kopf's arguments: the health endpoint and logging. kopf hosts the process and watches nothing itself (hence
     --all-namespaces, which asks it for nothing); the namespaces the operator watches are KUBETRAIN_NAMESPACES. */}}
{{- define "kubetrain.operatorArgs" -}}
- --all-namespaces
- --liveness=http://0.0.0.0:{{ .Values.operator.healthPort }}/healthz
- --log-format={{ .Values.operator.logFormat }}
{{- if ne .Values.operator.verbosity "normal" }}
- --{{ .Values.operator.verbosity }}
{{- end }}
{{- end }}

{{/* The operator's rules, the same for a ClusterRole (all namespaces) and for a Role per watched namespace.
     Each rule is what the operator does (operator/kubetrain/controller.py watches, kube.py writes); see the comments.
     */}}
{{- define "kubetrain.rules" -}}
# DistributedTrainings: the operator lists and watches them; ttlSecondsAfterFinished deletes one.
- apiGroups: [kubetrain.dev]
  resources: [distributedtrainings]
  verbs: [get, list, watch, delete]
# The operator writes phase, conditions and replica counts.
- apiGroups: [kubetrain.dev]
  resources: [distributedtrainings/status]
  verbs: [patch]
# Every child kind but the PodGroup is watched: the operator's cache is fed by these watches and a reconcile pass
# reads only the cache (list: the watch's first listing). Worker pods and launcher Jobs are created, and deleted on
# restart and cleanup; get reads an existing object on a create conflict to check who owns it.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
# Before a restart deletes a failed attempt's launcher pod, the end of its log is copied into a ConfigMap.
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
# The headless Service and the hostfile ConfigMap: created, and patched back when they drift.
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [get, list, watch, create, patch]
# A failed attempt's log copy (<name>-attempt-<N>-log): deleted when newer attempts' copies push it out.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [delete]
# An elastic job's Ready workers, which the operator lists in the EndpointSlice of its <name>-ready Service.
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch, create, patch]
# The per-job ssh key Secret: created once, never changed (removed by garbage collection).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create]
# spec.scheduling.gang: the job's PodGroup (scheduler-plugins' or Volcano's), created with each attempt's workers;
# get reads it back when it already exists. Removed with the job by garbage collection.
# Once the job's workers are gone (it ended or is suspended), a Volcano PodGroup is deleted (else Volcano queues the
# empty group again and keeps its resources for it) and a Coscheduling one is patched (an annotation on which the
# scheduler looks again at the gangs waiting for those nodes).
- apiGroups: [scheduling.volcano.sh]
  resources: [podgroups]
  verbs: [get, create, delete]
- apiGroups: [scheduling.x-k8s.io]
  resources: [podgroups]
  verbs: [get, create, patch]
# Events on DistributedTrainings.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.kueue.enabled }}
# kueue.enabled: Kueue's Workloads of the jobs' pod groups are watched (read only) for what Kueue says of them.
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [list, watch]
{{- end }}
{{- end }}
