package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeNotReady is a Condition step: it stops kwok from playing the node's kubelet and marks
// the node NotReady, as the node of a stopped VM becomes. It is true only once a read finds
// the node already NotReady, so a wait calls it at least twice: a kwok status update already
// in flight when the annotation was removed can set Ready=True once more on a loaded machine.
func NodeNotReady(kube kubernetes.Interface, name string) Condition {
	return func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, managed := n.Annotations[KwokNodeAnnotation]; managed {
			delete(n.Annotations, KwokNodeAnnotation)
			if n, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return false, err
			}
		}
		now := metav1.Now()
		found := false
		for i := range n.Status.Conditions {
			c := &n.Status.Conditions[i]
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status == corev1.ConditionFalse {
				return true, nil
			}
			c.Status, c.LastHeartbeatTime, c.LastTransitionTime = corev1.ConditionFalse, now, now
			found = true
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now})
		}
		if _, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return false, err
		}
		return false, fmt.Errorf("node %s marked NotReady, not yet read back", name)
	}
}

// NodeReady is a Condition step: it hands the node back to kwok, whose node-initialize stage
// reports any node it manages that is not Ready as Ready, and is true once the node is.
func NodeReady(kube kubernetes.Interface, name string) Condition {
	return func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Annotations[KwokNodeAnnotation] == "" {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[KwokNodeAnnotation] = "fake"
			_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("node %s handed back to kwok, conditions %v", name, n.Status.Conditions)
	}
}
