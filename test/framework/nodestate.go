package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeNotReady is a Condition step: it stops kwok from playing the node's kubelet (removes its
// annotation) and marks the node NotReady, as the node of a stopped VM becomes. It is true only
// once a read finds the node already NotReady, so a wait calls it at least twice: a kwok status
// update already in flight when the annotation was removed can set Ready=True once more on a
// loaded machine.
func NodeNotReady(kube kubernetes.Interface, name string) Condition {
	return nodeReadiness(kube, name, false)
}

// NodeReady is a Condition step: it gives the node back to kwok (sets its annotation) and marks
// it Ready, as the kubelet of a started VM does; true once a read finds it Ready. It does not
// wait for kwok to report the node Ready itself: kwok does not always take back a node whose
// annotation returns.
func NodeReady(kube kubernetes.Interface, name string) Condition {
	return nodeReadiness(kube, name, true)
}

// nodeReadiness moves the node's kwok annotation and Ready condition towards ready; true once a
// read finds both as wanted.
func nodeReadiness(kube kubernetes.Interface, name string, ready bool) Condition {
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	return func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, managed := n.Annotations[KwokNodeAnnotation]; managed != ready {
			if ready {
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Annotations[KwokNodeAnnotation] = "fake"
			} else {
				delete(n.Annotations, KwokNodeAnnotation)
			}
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
			if c.Status == want {
				return true, nil
			}
			c.Status, c.LastHeartbeatTime, c.LastTransitionTime = want, now, now
			found = true
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: want, LastHeartbeatTime: now, LastTransitionTime: now})
		}
		if _, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return false, err
		}
		return false, fmt.Errorf("node %s marked Ready=%s, not yet read back", name, want)
	}
}
