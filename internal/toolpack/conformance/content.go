package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpcluster/mcpcluster/mcp"
)

const (
	staticText  = "This is the content of the static text resource."
	watchedText = "This is the content of the watched resource."
)

func registerResources(s *mcp.Server) {
	s.AddResource(mcp.Resource{
		URI:         "test://static-text",
		Name:        "static-text",
		Description: "A static text resource",
		MimeType:    "text/plain",
	}, func(ctx context.Context, req *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/plain", Text: staticText}}}, nil
	})

	s.AddResource(mcp.Resource{
		URI:         "test://static-binary",
		Name:        "static-binary",
		Description: "A static binary resource (a PNG image)",
		MimeType:    "image/png",
	}, func(ctx context.Context, req *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "image/png", Blob: pngBase64}}}, nil
	})

	s.AddResourceTemplate(mcp.ResourceTemplate{
		URITemplate: "test://template/{id}/data",
		Name:        "template-data",
		Description: "JSON data for the id in the URI",
		MimeType:    "application/json",
	}, func(ctx context.Context, req *mcp.Request, uri string, vars map[string]string) (*mcp.ReadResourceResult, error) {
		id := vars["id"]
		b, err := json.Marshal(struct {
			ID           string `json:"id"`
			TemplateTest bool   `json:"templateTest"`
			Data         string `json:"data"`
		}{id, true, "Data for ID: " + id})
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "application/json", Text: string(b)}}}, nil
	})

	// Clients may subscribe to this one (resources/subscribe); the server
	// offers subscriptions for every resource.
	s.AddResource(mcp.Resource{
		URI:         "test://watched-resource",
		Name:        "watched-resource",
		Description: "A resource clients can subscribe to for updates",
		MimeType:    "text/plain",
	}, func(ctx context.Context, req *mcp.Request, uri string, _ map[string]string) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MimeType: "text/plain", Text: watchedText}}}, nil
	})
}

func registerPrompts(s *mcp.Server) {
	s.AddPrompt(mcp.Prompt{
		Name:        "test_simple_prompt",
		Description: "A simple prompt without arguments",
	}, func(ctx context.Context, req *mcp.Request, _ map[string]string) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
			{Role: "user", Content: mcp.TextContent("This is a simple prompt for testing.")},
		}}, nil
	})

	s.AddPrompt(mcp.Prompt{
		Name:        "test_prompt_with_arguments",
		Description: "A prompt with two required arguments",
		Arguments: []mcp.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		},
	}, func(ctx context.Context, req *mcp.Request, args map[string]string) (*mcp.GetPromptResult, error) {
		text := fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"])
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{{Role: "user", Content: mcp.TextContent(text)}}}, nil
	})

	s.AddPrompt(mcp.Prompt{
		Name:        "test_prompt_with_embedded_resource",
		Description: "A prompt that embeds the resource named by its argument",
		Arguments: []mcp.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		},
	}, func(ctx context.Context, req *mcp.Request, args map[string]string) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
			{Role: "user", Content: mcp.EmbeddedResource(mcp.ResourceContents{
				URI:      args["resourceUri"],
				MimeType: "text/plain",
				Text:     "Embedded resource content for testing.",
			})},
			{Role: "user", Content: mcp.TextContent("Please process the embedded resource above.")},
		}}, nil
	})

	s.AddPrompt(mcp.Prompt{
		Name:        "test_prompt_with_image",
		Description: "A prompt that includes an image",
	}, func(ctx context.Context, req *mcp.Request, _ map[string]string) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
			{Role: "user", Content: mcp.ImageContent(pngBase64, "image/png")},
			{Role: "user", Content: mcp.TextContent("Please analyze the image above.")},
		}}, nil
	})
}

// arg1Suggestions are the completions offered for arg1 of
// test_prompt_with_arguments.
var arg1Suggestions = []string{"paris", "park", "party"}

// complete suggests values for arg1 of test_prompt_with_arguments that
// start with what the client typed; everything else has no suggestions.
func complete(ctx context.Context, req *mcp.Request, p *mcp.CompleteRequest) (*mcp.Completion, error) {
	values := []string{}
	if p.Ref.Type == "ref/prompt" && p.Ref.Name == "test_prompt_with_arguments" && p.Argument.Name == "arg1" {
		for _, v := range arg1Suggestions {
			if strings.HasPrefix(v, strings.ToLower(p.Argument.Value)) {
				values = append(values, v)
			}
		}
	}
	total := len(values)
	return &mcp.Completion{Values: values, Total: &total}, nil
}
