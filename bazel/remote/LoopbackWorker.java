// SPDX-License-Identifier: Apache-2.0
//
// Bazel's reference remote worker (com.google.devtools.build.remote.worker,
// Debian's bazel-bootstrap-source) serving on the loopback interface only.
// RemoteWorker.main binds every interface (NettyServerBuilder.forPort) and
// has no option to choose one, so this launcher builds the same services
// from the same options, in the same package (their classes are
// package-private), and binds 127.0.0.1. Compiled by bazel/remote/local.py
// together with the worker's sources against Bazel's server jar.
//
// Exit status: 0 after a clean shutdown (SIGTERM), 2 for bad options,
// 3 when the port cannot be bound (in use), so the caller can tell them apart.
package com.google.devtools.build.remote.worker;

import build.bazel.remote.execution.v2.ActionResult;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.devtools.build.lib.remote.options.RemoteOptions;
import com.google.devtools.build.lib.remote.util.DigestUtil;
import com.google.devtools.build.lib.remote.util.TracingMetadataUtils;
import com.google.devtools.build.lib.vfs.FileSystem;
import com.google.devtools.build.lib.vfs.FileSystemUtils;
import com.google.devtools.build.lib.vfs.Path;
import com.google.devtools.common.options.OptionsParser;
import com.google.devtools.common.options.OptionsParsingException;
import io.grpc.Server;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

public final class LoopbackWorker {
  // Held so that the level set below is not lost when the logger is collected.
  private static final Logger nettyLogger = Logger.getLogger("io.grpc.netty");

  private static void fail(int status, String message) {
    System.err.println("LoopbackWorker: " + message);
    System.exit(status);
  }

  public static void main(String[] args) throws Exception {
    OptionsParser parser =
        OptionsParser.builder()
            .optionsClasses(RemoteOptions.class, RemoteWorkerOptions.class)
            .build();
    try {
      parser.parse(args);
    } catch (OptionsParsingException e) {
      fail(2, e.getMessage());
    }
    RemoteOptions remoteOptions = parser.getOptions(RemoteOptions.class);
    RemoteWorkerOptions options = parser.getOptions(RemoteWorkerOptions.class);
    if (options.casPath == null || options.workPath == null) {
      fail(2, "--cas_path and --work_path are required (absolute, existing directories)");
    }
    if (options.sandboxing || options.httpListenPort != 0 || options.tlsCertificate != null) {
      fail(2, "--sandboxing, --http_listen_port and TLS are not supported here");
    }
    // Netty logs closed-stream races at WARNING; they are not errors.
    nettyLogger.setLevel(Level.SEVERE);

    FileSystem fs = RemoteWorker.getFileSystem();
    Path casPath = fs.getPath(options.casPath);
    Path workPath = fs.getPath(options.workPath);
    if (!casPath.isDirectory() || !workPath.isDirectory()) {
      fail(2, "--cas_path and --work_path must be existing directories");
    }
    DigestUtil digestUtil = new DigestUtil(fs.getDigestFunction());
    OnDiskBlobStoreCache cache = new OnDiskBlobStoreCache(remoteOptions, casPath, digestUtil);
    FileSystemUtils.createDirectoryAndParents(workPath);
    ExecutionServer execServer =
        new ExecutionServer(
            workPath,
            /* sandboxPath= */ null,
            options,
            cache,
            new ConcurrentHashMap<String, ListenableFuture<ActionResult>>(),
            digestUtil);

    ServerInterceptor headers = new TracingMetadataUtils.ServerHeadersInterceptor();
    Server server =
        NettyServerBuilder.forAddress(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), options.listenPort))
            .addService(ServerInterceptors.intercept(new ActionCacheServer(cache, digestUtil), headers))
            .addService(
                ServerInterceptors.intercept(
                    new ByteStreamServer(cache, workPath, digestUtil), headers))
            .addService(ServerInterceptors.intercept(new CasServer(cache), headers))
            .addService(
                ServerInterceptors.intercept(new CapabilitiesServer(digestUtil, true), headers))
            .addService(ServerInterceptors.intercept(execServer, headers))
            .build();
    try {
      server.start();
    } catch (IOException e) {
      fail(3, "cannot listen on 127.0.0.1:" + options.listenPort + ": " + e.getMessage());
    }
    System.err.println(
        "LoopbackWorker: serving REAPI on 127.0.0.1:" + server.getPort() + ", jobs " + options.jobs);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  server.shutdownNow();
                  try {
                    server.awaitTermination(5, TimeUnit.SECONDS);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                }));
    server.awaitTermination();
  }
}
