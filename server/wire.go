package server

import "github.com/patrdb/patrdb/api"

// The request and reply bodies are package api's, where package client
// reads them too; these names are the server's own for them.
type (
	Health             = api.Health
	RunSummary         = api.RunSummary
	GroupTree          = api.GroupTree
	NodeInfo           = api.NodeInfo
	Trajectory         = api.Trajectory
	EventPage          = api.EventPage
	RunStats           = api.RunStats
	Stats              = api.Stats
	StepMetrics        = api.StepMetrics
	RunJSON            = api.RunJSON
	EventJSON          = api.EventJSON
	Index              = api.Index
	Endpoint           = api.Endpoint
	Keyed              = api.Keyed
	CreateRunRequest   = api.CreateRunRequest
	CreateRunResponse  = api.CreateRunResponse
	RunStatusRequest   = api.RunStatusRequest
	CheckpointRequest  = api.CheckpointRequest
	CheckpointResponse = api.CheckpointResponse
	OpenStepRequest    = api.OpenStepRequest
	OpenStepResponse   = api.OpenStepResponse
	LeaseRequest       = api.LeaseRequest
	LeaseGrant         = api.LeaseGrant
	LeaseResponse      = api.LeaseResponse
	SubmitRequest      = api.SubmitRequest
	AbandonRequest     = api.AbandonRequest
	StepStatus         = api.StepStatus
	LeafScore          = api.LeafScore
	CloseGroupRequest  = api.CloseGroupRequest
	CloseGroupResponse = api.CloseGroupResponse
	JudgeAnswer        = api.JudgeAnswer
	LeafOutcome        = api.LeafOutcome
	ShapeAnswers       = api.ShapeAnswers
	JudgeNeed          = api.JudgeNeed
	InduceNeed         = api.InduceNeed
	ConsolidateNeed    = api.ConsolidateNeed
	ShapeNeeds         = api.ShapeNeeds
	ShapeRequest       = api.ShapeRequest
	ShapeResponse      = api.ShapeResponse
	ActivateRequest    = api.ActivateRequest
	ActiveRubrics      = api.ActiveRubrics
)
