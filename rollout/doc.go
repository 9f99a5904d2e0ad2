// Package rollout holds the plain types of the PaTR rollout protocol: the
// task a group grows for, the interfaces a policy, an environment and a
// process scorer implement, and what a worker is leased and submits back.
//
// Package tree's coordinator and engine run the protocol; package client
// drives it over HTTP. Both speak these types (tree re-exports each one
// under its old name), so a worker program that talks to a server builds
// without the tree package, the server or its viewer.
package rollout
