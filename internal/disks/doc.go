// Package disks is the glue between Kubernetes volumes and Azure managed disks: StorageClass
// parameters (class.go), the disk a PersistentVolume refers to (volume.go), the zone labels and
// node affinity of a disk's PV (labels.go) and the ARM calls on disks (client.go). The zone of a
// new disk is decided by the pure package disks/zonechoice.
package disks
