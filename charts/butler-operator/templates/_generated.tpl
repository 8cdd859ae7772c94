{{/* Generated from the operator's code by `make crds`: edit the code, not this file. */}}
{{- define "butler-operator.rules" -}}
- apiGroups:
  - operator.butlerlabs.dev
  resources:
  - coreproviders
  - infrastructureproviders
  - bootstrapproviders
  - controlplaneproviders
  - addonproviders
  - ipamproviders
  - runtimeextensionproviders
  - providerupgrades
  verbs:
  - get
  - list
  - watch
  - update
  - patch
- apiGroups:
  - operator.butlerlabs.dev
  resources:
  - providerupgrades
  verbs:
  - create
- apiGroups:
  - operator.butlerlabs.dev
  resources:
  - coreproviders/status
  - coreproviders/finalizers
  - infrastructureproviders/status
  - infrastructureproviders/finalizers
  - bootstrapproviders/status
  - bootstrapproviders/finalizers
  - controlplaneproviders/status
  - controlplaneproviders/finalizers
  - addonproviders/status
  - addonproviders/finalizers
  - ipamproviders/status
  - ipamproviders/finalizers
  - runtimeextensionproviders/status
  - runtimeextensionproviders/finalizers
  - providerupgrades/status
  - providerupgrades/finalizers
  verbs:
  - get
  - update
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
  - patch
- apiGroups:
  - ""
  resources:
  - namespaces
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - "*"
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - ipallocations
  - networkpools
  - providerconfigs
  - teams
  - tenantclusters
  verbs:
  - list
  - patch
- apiGroups:
  - apiextensions.k8s.io
  resources:
  - customresourcedefinitions/status
  verbs:
  - patch
- apiGroups:
  - authentication.k8s.io
  resources:
  - tokenreviews
  verbs:
  - create
- apiGroups:
  - authorization.k8s.io
  resources:
  - subjectaccessreviews
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - serviceaccounts
  - services
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingadmissionpolicies
  - validatingadmissionpolicybindings
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - apiextensions.k8s.io
  resources:
  - customresourcedefinitions
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - apps
  resources:
  - deployments
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - policy
  resources:
  - poddisruptionbudgets
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - clusterrolebindings
  - clusterroles
  - rolebindings
  - roles
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - clusterroles
  - roles
  verbs:
  - escalate
  - bind
{{- end -}}
{{- define "butler-operator.upstreamRules" -}}
- apiGroups:
  - cert-manager.io
  resources:
  - issuers
  - certificates
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
  - update
  - patch
  - delete
- apiGroups:
  - cluster.x-k8s.io
  - addons.cluster.x-k8s.io
  - bootstrap.cluster.x-k8s.io
  - controlplane.cluster.x-k8s.io
  - infrastructure.cluster.x-k8s.io
  - ipam.cluster.x-k8s.io
  - runtime.cluster.x-k8s.io
  resources:
  - "*"
  verbs:
  - get
  - list
  - patch
{{- end -}}
{{- define "butler-operator.uninstallRules" -}}
- apiGroups:
  - operator.butlerlabs.dev
  resources:
  - coreproviders
  - infrastructureproviders
  - bootstrapproviders
  - controlplaneproviders
  - addonproviders
  - ipamproviders
  - runtimeextensionproviders
  verbs:
  - get
  - list
  - watch
  - delete
  - patch
{{- end -}}
{{- define "butler-operator.kinds" -}}
- - core
  - CoreProvider
  - ""
- - bootstrap
  - BootstrapProvider
  - bootstrap-system
- - controlPlane
  - ControlPlaneProvider
  - control-plane-system
- - infrastructure
  - InfrastructureProvider
  - infrastructure-system
- - addon
  - AddonProvider
  - addon-system
- - ipam
  - IPAMProvider
  - ipam-system
- - runtimeExtension
  - RuntimeExtensionProvider
  - runtime-extension-system
{{- end -}}
{{- define "butler-operator.butlerProviders" -}}
CoreProvider/butler InfrastructureProvider/harvester InfrastructureProvider/nutanix InfrastructureProvider/proxmox InfrastructureProvider/aws InfrastructureProvider/azure InfrastructureProvider/gcp
{{- end -}}
