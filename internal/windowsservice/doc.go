// Package windowsservice runs a program under the Windows Service Control Manager: the
// node manager's --windows-service flag. It is the only code of the project that differs by
// operating system, kept apart so that the lint stage can check it for Windows without
// compiling the node manager's Kubernetes dependencies for a second platform.
package windowsservice
