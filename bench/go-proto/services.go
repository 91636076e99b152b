// gRPC service glue for the v1beta1 device-plugin API, written by hand in the shape of the
// code protoc-gen-go's old grpc plugin generated (what kubelet's api.pb.go carries). It is
// compiled into the same package as the messages protoc-gen-go generates from
// src/rpc/proto/deviceplugin.proto at build time (bench/build-go.sh).
package v1beta1

import (
	"context"

	"google.golang.org/grpc"
)

const (
	Version           = "v1beta1"
	DevicePluginPath  = "/v1beta1.DevicePlugin/"
	RegistrationPath  = "/v1beta1.Registration/"
	Healthy           = "Healthy"
	Unhealthy         = "Unhealthy"
	KubeletSocketName = "kubelet.sock"
)

// ---- v1beta1.Registration (served by kubelet) -------------------------------------------------

type RegistrationServer interface {
	Register(context.Context, *RegisterRequest) (*Empty, error)
}

func RegisterRegistrationServer(s *grpc.Server, srv RegistrationServer) {
	s.RegisterService(&registrationDesc, srv)
}

func registrationRegisterHandler(srv interface{}, ctx context.Context, dec func(interface{}) error,
	_ grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(RegisterRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	return srv.(RegistrationServer).Register(ctx, in)
}

var registrationDesc = grpc.ServiceDesc{
	ServiceName: "v1beta1.Registration",
	HandlerType: (*RegistrationServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Register", Handler: registrationRegisterHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    "deviceplugin.proto",
}

func Register(ctx context.Context, cc *grpc.ClientConn, in *RegisterRequest) (*Empty, error) {
	out := new(Empty)
	return out, cc.Invoke(ctx, RegistrationPath+"Register", in, out)
}

// ---- v1beta1.DevicePlugin (served by the plugin) ----------------------------------------------

type DevicePluginServer interface {
	GetDevicePluginOptions(context.Context, *Empty) (*DevicePluginOptions, error)
	ListAndWatch(*Empty, DevicePlugin_ListAndWatchServer) error
	GetPreferredAllocation(context.Context, *PreferredAllocationRequest) (*PreferredAllocationResponse, error)
	Allocate(context.Context, *AllocateRequest) (*AllocateResponse, error)
	PreStartContainer(context.Context, *PreStartContainerRequest) (*PreStartContainerResponse, error)
}

type DevicePlugin_ListAndWatchServer interface {
	Send(*ListAndWatchResponse) error
	grpc.ServerStream
}

type lawServer struct{ grpc.ServerStream }

func (x *lawServer) Send(m *ListAndWatchResponse) error { return x.ServerStream.SendMsg(m) }

func RegisterDevicePluginServer(s *grpc.Server, srv DevicePluginServer) {
	s.RegisterService(&devicePluginDesc, srv)
}

func unary(newIn func() interface{}, call func(DevicePluginServer, context.Context, interface{}) (interface{}, error)) func(interface{}, context.Context, func(interface{}) error, grpc.UnaryServerInterceptor) (interface{}, error) {
	return func(srv interface{}, ctx context.Context, dec func(interface{}) error,
		_ grpc.UnaryServerInterceptor) (interface{}, error) {
		in := newIn()
		if err := dec(in); err != nil {
			return nil, err
		}
		return call(srv.(DevicePluginServer), ctx, in)
	}
}

var devicePluginDesc = grpc.ServiceDesc{
	ServiceName: "v1beta1.DevicePlugin",
	HandlerType: (*DevicePluginServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "GetDevicePluginOptions", Handler: unary(func() interface{} { return new(Empty) },
			func(s DevicePluginServer, c context.Context, in interface{}) (interface{}, error) {
				return s.GetDevicePluginOptions(c, in.(*Empty))
			})},
		{MethodName: "GetPreferredAllocation", Handler: unary(func() interface{} { return new(PreferredAllocationRequest) },
			func(s DevicePluginServer, c context.Context, in interface{}) (interface{}, error) {
				return s.GetPreferredAllocation(c, in.(*PreferredAllocationRequest))
			})},
		{MethodName: "Allocate", Handler: unary(func() interface{} { return new(AllocateRequest) },
			func(s DevicePluginServer, c context.Context, in interface{}) (interface{}, error) {
				return s.Allocate(c, in.(*AllocateRequest))
			})},
		{MethodName: "PreStartContainer", Handler: unary(func() interface{} { return new(PreStartContainerRequest) },
			func(s DevicePluginServer, c context.Context, in interface{}) (interface{}, error) {
				return s.PreStartContainer(c, in.(*PreStartContainerRequest))
			})},
	},
	Streams: []grpc.StreamDesc{{
		StreamName: "ListAndWatch",
		Handler: func(srv interface{}, stream grpc.ServerStream) error {
			m := new(Empty)
			if err := stream.RecvMsg(m); err != nil {
				return err
			}
			return srv.(DevicePluginServer).ListAndWatch(m, &lawServer{stream})
		},
		ServerStreams: true,
	}},
	Metadata: "deviceplugin.proto",
}

// Client side, as kubelet's endpoint uses it.

type DevicePluginClient struct{ cc *grpc.ClientConn }

func NewDevicePluginClient(cc *grpc.ClientConn) *DevicePluginClient { return &DevicePluginClient{cc} }

func (c *DevicePluginClient) GetDevicePluginOptions(ctx context.Context, in *Empty) (*DevicePluginOptions, error) {
	out := new(DevicePluginOptions)
	return out, c.cc.Invoke(ctx, DevicePluginPath+"GetDevicePluginOptions", in, out)
}

func (c *DevicePluginClient) Allocate(ctx context.Context, in *AllocateRequest) (*AllocateResponse, error) {
	out := new(AllocateResponse)
	return out, c.cc.Invoke(ctx, DevicePluginPath+"Allocate", in, out)
}

func (c *DevicePluginClient) GetPreferredAllocation(ctx context.Context, in *PreferredAllocationRequest) (*PreferredAllocationResponse, error) {
	out := new(PreferredAllocationResponse)
	return out, c.cc.Invoke(ctx, DevicePluginPath+"GetPreferredAllocation", in, out)
}

var lawDesc = grpc.StreamDesc{StreamName: "ListAndWatch", ServerStreams: true}

// ListAndWatch opens the stream; call RecvMsg on the result with a *ListAndWatchResponse.
func (c *DevicePluginClient) ListAndWatch(ctx context.Context, in *Empty) (grpc.ClientStream, error) {
	s, err := c.cc.NewStream(ctx, &lawDesc, DevicePluginPath+"ListAndWatch")
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(in); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return s, nil
}
