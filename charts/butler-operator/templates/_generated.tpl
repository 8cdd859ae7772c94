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
{{- define "butler-operator.ceilingRules" -}}
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
  - "*"
- apiGroups:
  - ""
  resources:
  - secrets
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
  - events.k8s.io
  resources:
  - events
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
- apiGroups:
  - ""
  resources:
  - namespaces
  - serviceaccounts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - nodes
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
  - pods
  verbs:
  - get
  - list
  - watch
  - delete
- apiGroups:
  - ""
  resources:
  - pods/eviction
  verbs:
  - create
- apiGroups:
  - ""
  resources:
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
  - coordination.k8s.io
  resources:
  - leases
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
  - update
  - patch
- apiGroups:
  - apiextensions.k8s.io
  resources:
  - customresourcedefinitions/status
  verbs:
  - update
  - patch
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
- nonResourceURLs:
  - /metrics
  verbs:
  - get
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - teams
  - providerconfigs
  - networkpools
  - tenantclusters
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - ipallocations
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - tenantclusters
  verbs:
  - delete
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - teams/status
  - providerconfigs/status
  - networkpools/status
  - ipallocations/status
  - tenantclusters/status
  verbs:
  - get
  - patch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - teams/finalizers
  verbs:
  - update
- apiGroups:
  - ""
  resources:
  - namespaces
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - ""
  resources:
  - resourcequotas
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - ""
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
  - patch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - rolebindings
  - clusterroles
  - clusterrolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - rbac.authorization.k8s.io
  resourceNames:
  - butler-team-viewer
  - butler-team-operator
  - butler-team-admin
  - butler-controller-secrets
  resources:
  - clusterroles
  verbs:
  - bind
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - butler-validating-webhook-configuration
  - butler-mutating-webhook-configuration
  resources:
  - validatingwebhookconfigurations
  - mutatingwebhookconfigurations
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - tenantclusters
  - tenantclusters/status
  - providerconfigs
  - providerconfigs/status
  - ipallocations
  - ipallocations/status
  - networkpools
  - networkpools/status
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  - events.k8s.io
  resources:
  - events
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - tenantclusters
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - tenantclusters
  - providerconfigs
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - get
  - create
  - patch
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - butler-webhook-certs
  resources:
  - secrets
  verbs:
  - update
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - providerconfigs
  - tenantclusters
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - butler.butlerlabs.dev
  resources:
  - providerconfigs/status
  - tenantclusters/status
  verbs:
  - get
  - update
  - patch
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - get
  - create
  - update
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
