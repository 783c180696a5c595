define float @f(float %x) {
  ret float %y
}
