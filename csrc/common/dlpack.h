// The DLPack (v0.8, unversioned "dltensor" capsule) structures culina reads, as published in
// https://github.com/dmlc/dlpack/blob/main/include/dlpack/dlpack.h. Only reading them is
// needed: culina borrows the producer's memory for the duration of one call.
#pragma once

#include <cstdint>

extern "C" {

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;

typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 } DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

}  // extern "C"
